"""The core's own plugin (:mod:`.plugin`): generic agents, the local executor and the
core's commands, registered through the same hooks as any plugin's."""
