"""The CLI face: `instantstart serve`, `instantstart mcp`, and one command per catalog operation."""
