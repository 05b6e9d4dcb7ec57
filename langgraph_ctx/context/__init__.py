"""Context accounting and decisions (pure functions over message lists): token counts, budgets."""
