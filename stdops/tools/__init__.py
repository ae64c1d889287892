"""Tools built on the runtimes: inputs made from a model's declarations (autoinputs), the per-node profiler
(profile), the model reducer (reduce) and the runtimes they compare against (runtimes)."""
