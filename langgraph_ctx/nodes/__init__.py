"""LangGraph nodes that prepare what the model sees (budget, compaction, system prompt)."""
