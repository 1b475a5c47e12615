"""The Slack channel: the Web API and Socket Mode through slack-sdk."""
