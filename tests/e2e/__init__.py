"""End-to-end tests: `dg dev` serving the example project, driven in a headless browser."""
