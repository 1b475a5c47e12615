-- The model preset a schedule's turns ask (agent/presets.py; NULL: the background model, else
-- the session's, else the default). Checked when the schedule is added; a name removed from
-- CRAYFISH_MODELS since is logged at the firing and the turn takes the next choice.
ALTER TABLE scheduled_turns ADD COLUMN model text;
