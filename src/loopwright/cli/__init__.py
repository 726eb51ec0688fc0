"""The `loopwright` command line: a thin shell that loads an agent, runs it and renders its
events (`main.py` parses and runs, `render.py` draws, `demo.py` runs the bundled example)."""
