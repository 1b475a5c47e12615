"""The Feishu/Lark channel: lark-oapi's IM API and its event long connection."""
