"""Notebook front ends: the %%elastic_train magic, its widgets, and the REST client they share."""
