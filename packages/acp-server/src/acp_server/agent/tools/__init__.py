"""Agent tools and their registry."""
