"""Unmodified agent programs of the example harness envs, run as processes
(``python path/to/program.py``); they read only OpenAI's environment variables."""
