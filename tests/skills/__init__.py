"""Skill evals: static checks of every skill, and scenario replays over MCP on the twin."""
