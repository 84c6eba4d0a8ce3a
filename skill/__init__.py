"""How agents and people reach the tools: registry, CLI, MCP server, demo, emulator."""
