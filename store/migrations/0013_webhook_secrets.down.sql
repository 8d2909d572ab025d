DROP TABLE gaffer.webhook_secrets;
