"""Data model."""
