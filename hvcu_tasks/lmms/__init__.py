"""Everything that touches lmms-eval: task hooks, the plugin, model wrappers, the task YAMLs and their generator."""
