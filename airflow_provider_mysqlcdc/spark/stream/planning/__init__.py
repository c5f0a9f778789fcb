"""Where a micro-batch ends: planned near the head by count, far behind by bytes; the first plan and the next one made ahead."""
