"""Notebook front ends: the %%elastic_train magic, the job handle and its output, and the REST
client they share."""
