"""What LLM requests cost, and the daily caps that refuse turns past them."""
