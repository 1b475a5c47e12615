"""The QQ channel: OneBot v11 over a forward WebSocket, as NapCat serves it."""
