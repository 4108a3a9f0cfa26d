"""Celery workers: the training task, progress publishing and job claims."""
