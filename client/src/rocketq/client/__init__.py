"""rocketq.client — see docs/architecture.md."""
