"""Models generated from schemas/ by tools/generate_types.py; do not edit."""
