"""Built-in pieces of the core, registered through the same hooks as any plugin."""
