"""The read-only web console."""
