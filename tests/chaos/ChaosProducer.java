import java.io.FileWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The chaos run's Java client (kafka-clients 4.3): an idempotent acks=all producer writing
 * "NAME-SEQ" round-robin over the partitions at RATE per second, recording each
 * acknowledgement and failure as workload.py's producer does (one JSON line, flushed).
 * SIGTERM stops it: it flushes what is in flight and exits.
 *
 *   java ChaosProducer BOOTSTRAP TOPIC OUT.jsonl NAME PARTITIONS RATE
 */
public class ChaosProducer {
  static PrintWriter out;

  static synchronized void line(String json) {
    out.println(json);
    out.flush();
  }

  static double now() {
    return System.currentTimeMillis() / 1000.0;
  }

  public static void main(String[] args) throws IOException, InterruptedException {
    String bootstrap = args[0], topic = args[1], name = args[3];
    int partitions = Integer.parseInt(args[4]);
    double rate = Double.parseDouble(args[5]);
    out = new PrintWriter(new FileWriter(args[2], true));
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    p.put("acks", "all");
    p.put("enable.idempotence", "true");
    p.put("linger.ms", "5");
    p.put("delivery.timeout.ms", "120000");
    p.put("request.timeout.ms", "10000");
    p.put("retry.backoff.ms", "100");
    p.put("metadata.max.age.ms", "2000");
    p.put("reconnect.backoff.max.ms", "1000");
    p.put("key.serializer", StringSerializer.class.getName());
    p.put("value.serializer", StringSerializer.class.getName());
    AtomicBoolean stop = new AtomicBoolean();
    KafkaProducer<String, String> producer = new KafkaProducer<>(p);
    Thread main = Thread.currentThread();
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      stop.set(true);
      try {
        main.join(90000);
      } catch (InterruptedException e) {
        // exiting anyway
      }
    }));
    long seq = 0;
    long start = System.nanoTime();
    while (!stop.get()) {
      String v = name + "-" + seq;
      int part = (int) (seq % partitions);
      double sent = now();
      try {
        producer.send(new ProducerRecord<>(topic, part, null, v), (md, err) -> {
          if (err == null) {
            line(String.format("{\"t\": %.4f, \"k\": \"ack\", \"v\": \"%s\", \"p\": %d, \"o\": %d, \"lat\": %.4f}",
                now(), v, md.partition(), md.offset(), now() - sent));
          } else {
            line(String.format("{\"t\": %.4f, \"k\": \"fail\", \"v\": \"%s\", \"p\": %d, \"err\": \"%s\"}",
                now(), v, part, err.getClass().getSimpleName()));
          }
        });
      } catch (Exception e) {  // a fatal producer error: a new producer goes on
        line(String.format("{\"t\": %.4f, \"k\": \"fatal\", \"err\": \"%s\"}", now(), e.getClass().getSimpleName()));
        producer.close(java.time.Duration.ofSeconds(5));
        producer = new KafkaProducer<>(p);
      }
      seq++;
      long due = start + (long) (seq / rate * 1e9);
      long wait = due - System.nanoTime();
      if (wait > 0) Thread.sleep(wait / 1000000, (int) (wait % 1000000));
    }
    producer.flush();
    producer.close();
    line(String.format("{\"t\": %.4f, \"k\": \"done\", \"sent\": %d}", now(), seq));
  }
}
