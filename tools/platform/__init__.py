"""Model Factory HTTP API: settings, httpx clients, wire models, errors."""
