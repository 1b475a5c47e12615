"""web_search: providers by name (SearXNG, Brave, Tavily, an entry-point group for more)."""
