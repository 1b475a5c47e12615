"""Notifications: the notify tool's bounds, webhook deliveries, and their job queue."""
