"""What a session is: its history (pure message values), the batch still open, and the one
reducer that builds both from the log (`replay.apply`), live and on load; compaction, which
folds a long history, and the small values events carry."""
