"""Searching a space: spaces (template, auto), ask/tell tuners, the cost model."""
