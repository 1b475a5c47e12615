"""Small talk: user messages auto-recall skips, since no memory note can help answer them."""

from __future__ import annotations

import re

# Greetings, thanks and acknowledgements, lower case. A message made of these alone (numbers,
# punctuation and emoji aside) asks nothing a note could answer; any other word (a name, a
# topic, a question word) means it might.
SMALL_TALK_WORDS = frozenset(
    """
    hi hello hey heya hiya howdy yo greetings good morning afternoon evening night gm gn
    there all again thanks thank you thx ty tysm cheers much so very a lot
    ok okay okey k kk yes yeah yep yup ya no nope nah sure cool great nice awesome perfect
    fine alright bye goodbye cya later see lol haha hah hmm hm wow oh ah np welcome
    got it will do sounds please
    hallo hola olá bonjour salut ciao merci danke gracias grazie obrigado obrigada
    你好 谢谢 好的 嗯
    """.split()
)
# Longer messages are searched whatever their words.
MAX_WORDS = 8
_WORD = re.compile(r"\w+")


def is_small_talk(message: str) -> bool:
    """True for a message of small-talk words only (numbers allowed beside them), or of
    punctuation and emoji only; a bare number is not small talk (it may name something)."""
    words = [word.lower() for word in _WORD.findall(message)]
    if len(words) > MAX_WORDS:
        return False
    said = [word for word in words if not word.isdigit()]
    if not said:
        return not words and bool(message.strip())
    return all(word in SMALL_TALK_WORDS for word in said)
