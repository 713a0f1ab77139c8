import com.fasterxml.jackson.core.json.JsonWriteFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.confluent.kafka.serializers.KafkaAvroDeserializer;
import io.confluent.kafka.serializers.KafkaAvroSerializer;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.*;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;
import org.apache.avro.io.JsonEncoder;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

// Confluent's Java Avro serde against a Schema Registry, for the tests. Arguments:
//   produce bootstrap registryUrl topic schemaFile firstKey
//     stdin: one record a line in Avro's JSON encoding (the schema's); each becomes a
//     GenericRecord, sent to partition 0 with KafkaAvroSerializer (auto.register.schemas=true)
//     as the value, key "k<firstKey + i>" through KafkaAvroSerializer too (the Avro schema
//     "string", subject topic-key).
//     Prints {"offset":o} per record once acknowledged.
//   consume bootstrap registryUrl topic count
//     Reads partition 0 from the beginning, deserializes key and value with
//     KafkaAvroDeserializer and prints per record
//     {"offset":o,"keyId":id,"valueId":id,"key":"...","schema":"full name","value":<Avro JSON encoding>}
//     (ids from the 5-byte wire prefix). Exits 3 if fewer than count arrive within 30 s.
public class AvroRoundTrip {
  // ASCII out (non-ASCII characters escaped): whatever the stdout encoding of the platform
  static final ObjectMapper JSON = JsonMapper.builder().enable(JsonWriteFeature.ESCAPE_NON_ASCII).build();

  public static void main(String[] a) throws Exception {
    if (a[0].equals("produce")) produce(a[1], a[2], a[3], Path.of(a[4]), Integer.parseInt(a[5]));
    else consume(a[1], a[2], a[3], Integer.parseInt(a[4]));
  }

  static void produce(String bootstrap, String registry, String topic, Path schemaFile, int firstKey) throws Exception {
    Schema schema = new Schema.Parser().parse(Files.readString(schemaFile));
    GenericDatumReader<GenericRecord> reader = new GenericDatumReader<>(schema);
    List<GenericRecord> records = new ArrayList<>();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    for (String line; (line = in.readLine()) != null; ) {
      if (!line.isBlank()) records.add(reader.read(null, DecoderFactory.get().jsonDecoder(schema, line)));
    }
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    p.put("key.serializer", KafkaAvroSerializer.class.getName());
    p.put("value.serializer", KafkaAvroSerializer.class.getName());
    p.put("schema.registry.url", registry);
    p.put("auto.register.schemas", "true");
    p.put("acks", "all");
    p.put("linger.ms", "0");
    try (KafkaProducer<Object, Object> producer = new KafkaProducer<>(p)) {
      List<RecordMetadata> sent = new ArrayList<>();
      for (int i = 0; i < records.size(); i++) {
        sent.add(producer.send(new ProducerRecord<>(topic, 0, "k" + (firstKey + i), records.get(i))).get());
      }
      for (RecordMetadata m : sent) System.out.println("{\"offset\":" + m.offset() + "}");
    }
    System.out.flush();
  }

  static String avroJson(Schema schema, Object datum) throws Exception {
    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    JsonEncoder enc = EncoderFactory.get().jsonEncoder(schema, buf);
    new GenericDatumWriter<Object>(schema).write(datum, enc);
    enc.flush();
    return buf.toString(StandardCharsets.UTF_8);
  }

  static int schemaId(byte[] wire) {
    if (wire == null || wire.length < 5 || wire[0] != 0) return -1;
    return ByteBuffer.wrap(wire, 1, 4).getInt();
  }

  static void consume(String bootstrap, String registry, String topic, int count) throws Exception {
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    p.put("key.deserializer", ByteArrayDeserializer.class.getName());
    p.put("value.deserializer", ByteArrayDeserializer.class.getName());
    p.put("enable.auto.commit", "false");
    Map<String, Object> serde = Map.of("schema.registry.url", registry);
    KafkaAvroDeserializer keys = new KafkaAvroDeserializer();
    keys.configure(serde, true);
    KafkaAvroDeserializer values = new KafkaAvroDeserializer();
    values.configure(serde, false);
    int seen = 0;
    long deadline = System.currentTimeMillis() + 30_000;
    try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
      TopicPartition tp = new TopicPartition(topic, 0);
      c.assign(List.of(tp));
      c.seekToBeginning(List.of(tp));
      while (seen < count && System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
          Object key = r.key() == null ? null : keys.deserialize(topic, r.key());
          Object value = values.deserialize(topic, r.value());
          ObjectNode line = JSON.createObjectNode();
          line.put("offset", r.offset());
          line.put("keyId", schemaId(r.key()));
          line.put("valueId", schemaId(r.value()));
          line.put("key", key == null ? null : key.toString());
          if (value instanceof GenericRecord) {
            Schema schema = ((GenericRecord) value).getSchema();
            line.put("schema", schema.getFullName());
            line.set("value", JSON.readTree(avroJson(schema, value)));
          } else {
            line.put("schema", value == null ? null : value.getClass().getName());
            line.put("value", String.valueOf(value));
          }
          System.out.println(JSON.writeValueAsString(line));
          seen++;
        }
      }
    }
    keys.close();
    values.close();
    System.out.flush();
    System.exit(seen >= count ? 0 : 3);
  }
}
