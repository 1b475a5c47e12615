"""What a turn works with: the assistant, its own tools, the workspace's files, media."""
