"""kafka-python, aiokafka, kcat and the Java client against a real Krait broker."""

import asyncio
import shutil
import subprocess
import uuid

import pytest

from tests.krait_harness import JavaProgram


def _topic(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_kafka_python_defaults(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = _topic("kp")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, 2, 1)])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)  # defaults: idempotent in 3.x
    futures = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2) for i in range(200)]
    producer.flush(20)
    metas = [f.get(10) for f in futures]
    assert sorted(m.offset for m in metas if m.partition == 0) == list(range(100))
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=5000)
    consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    consumer.seek_to_beginning()
    got = [(m.key, m.value) for m in consumer]
    consumer.close()
    assert sorted(got) == sorted((b"k%d" % i, b"v%d" % i) for i in range(200))
    admin.close()


def test_aiokafka(broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    topic = _topic("aio")

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip")
        await producer.start()
        try:
            for i in range(100):
                await producer.send_and_wait(topic, b"m%d" % i, key=b"k")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            await consumer.seek_to_beginning()
            out = []
            while len(out) < 100:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 10)
                for msgs in batch.values():
                    out.extend(m.value for m in msgs)
            return out
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [b"m%d" % i for i in range(100)]


def test_kcat(broker):
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.skip("kcat is not installed (apt-get install kcat)")
    topic = _topic("kcat")
    out = subprocess.run([kcat, "-b", broker.bootstrap, "-L"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "broker" in out.stdout
    data = "\n".join(f"line{i}" for i in range(50)) + "\n"
    p = subprocess.run([kcat, "-b", broker.bootstrap, "-P", "-t", topic, "-p", "0"], input=data, text=True,
                       capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr
    c = subprocess.run([kcat, "-b", broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
                       capture_output=True, text=True, timeout=30)
    assert c.returncode == 0, c.stderr
    assert c.stdout.split() == [f"line{i}" for i in range(50)]


JAVA_SRC = r"""
import java.util.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import java.time.Duration;

public class KraitJavaCheck {
  public static void main(String[] a) throws Exception {
    String bs = a[0], topic = a[1];
    Properties p = new Properties();
    p.put("bootstrap.servers", bs);
    p.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
    p.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
    try (KafkaProducer<String,String> prod = new KafkaProducer<>(p)) {
      for (int i = 0; i < 100; i++) prod.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i)).get();
    }
    Properties c = new Properties();
    c.put("bootstrap.servers", bs);
    c.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
    c.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
    int n = 0;
    try (KafkaConsumer<String,String> cons = new KafkaConsumer<>(c)) {
      TopicPartition tp = new TopicPartition(topic, 0);
      cons.assign(List.of(tp));
      cons.seekToBeginning(List.of(tp));
      long deadline = System.currentTimeMillis() + 30000;
      while (n < 100 && System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<String,String> r : cons.poll(Duration.ofMillis(500))) {
          if (!r.value().equals("v" + r.offset())) throw new RuntimeException("bad record at " + r.offset());
          n++;
        }
      }
    }
    System.out.println("consumed " + n);
  }
}
"""


def test_java_client(broker, tmp_path):
    java = JavaProgram(JAVA_SRC, "KraitJavaCheck", tmp_path)
    topic = _topic("java")
    out = java.run(broker.bootstrap, topic)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "consumed 100" in out.stdout
