"""End-to-end tests: `dagster dev` serving the example project, driven in a headless browser."""
