from django.apps import AppConfig


class KafkaPortConfig(AppConfig):
    name = "brokerui.kafkaport"
    label = "kafkaport"
    verbose_name = "Kafka port security"
