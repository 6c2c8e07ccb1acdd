-- Where a tenant may make the platform connect (its egress policy, JSON:
-- {"allow": [CIDR or host name...], "mqtt_topic_prefix"?}); an operator
-- sets it. '{}' for every tenant until then: public addresses only.
ALTER TABLE tenants ADD COLUMN egress TEXT NOT NULL DEFAULT '{}';
