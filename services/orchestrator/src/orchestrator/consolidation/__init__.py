"""Memory that learns: idle session summaries and the consolidation turn that reads them."""
