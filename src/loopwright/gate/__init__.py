"""The gate: every tool call is allowed, asked about or denied before it runs (`permissions`),
a reply's calls are decided in order (`decide`; the batch's values, pending items and paused
checkpoints: `batch`), and a human's decision on a pending item is ruled in one place
(`rulebook`)."""
