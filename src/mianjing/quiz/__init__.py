"""Rehearsal: the spaced-repetition quiz, the mock interview, stats, and the kata judge.

Nothing imported on the quiz's start-up path may import torch, hypothesis or mkdocs.
"""
