from addition_v1.taskset import AdditionTaskset

__all__ = ["AdditionTaskset"]
