"""spark_streaming"""
