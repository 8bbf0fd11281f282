"""schemas"""
