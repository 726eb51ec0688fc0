"""One run of the loop: `loop.run_loop` reads as the loop (call the model, act on what it asks
for, repeat); its steps (`steps`), the task that drives it (`driver`), the calls it runs
(`runner`; one call to its outcome: `calls`), and the policies it asks: retries, fallback
models, the context budget, how a run ends (`finish`), hooks' calls and chains, observers.
`session` is the Python way to drive it."""
