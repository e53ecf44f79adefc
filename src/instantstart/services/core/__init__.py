"""The shared kernel of every domain: cluster registry, resource ledger, stage helpers, caches, instance facts."""
