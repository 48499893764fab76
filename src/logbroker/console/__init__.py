"""The read-only web console served by the broker (docs/console.md)."""
