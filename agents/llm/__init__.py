"""LLM backends behind one interface: Anthropic Messages, OpenAI Responses, replay."""
