"""The web console: pages over the broker's topics (grows into the full console later)."""
