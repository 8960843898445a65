"""The outbox's deliverer: posts what the engine recorded to Slack and Teams, outside the chat door.

It renders cards with the chat door's card builders but is not a door: nothing a person sends reaches it, and the
doors never import it (the layers contract puts it above them, beside the composition root's wiring).
"""
