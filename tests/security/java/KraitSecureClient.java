// The Java client (kafka-clients) against a secured Krait broker, for tests/security.
// One JVM runs several jobs so the tests pay for one JVM start:
//   java KraitSecureClient <job>...   with job = roundtrip:<props file>:<topic>:<n>
//                                            | describe-scram:<props file>
// and prints one line per job: "JOB <i> OK <detail>" or "JOB <i> ERROR <exception classes>: <message>".
import java.io.FileReader;
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class KraitSecureClient {
  static Properties load(String path) throws Exception {
    Properties p = new Properties();
    try (FileReader r = new FileReader(path)) { p.load(r); }
    // fail in seconds, not minutes, when the broker refuses us
    p.putIfAbsent("request.timeout.ms", "15000");
    p.putIfAbsent("default.api.timeout.ms", "20000");
    return p;
  }

  static String roundtrip(String propsFile, String topic, int n) throws Exception {
    Properties p = load(propsFile);
    p.put("key.serializer", StringSerializer.class.getName());
    p.put("value.serializer", StringSerializer.class.getName());
    p.put("max.block.ms", "20000");
    p.put("delivery.timeout.ms", "30000");
    try (KafkaProducer<String, String> prod = new KafkaProducer<>(p)) {
      for (int i = 0; i < n; i++) prod.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i)).get();
    }
    Properties c = load(propsFile);
    c.put("key.deserializer", StringDeserializer.class.getName());
    c.put("value.deserializer", StringDeserializer.class.getName());
    int got = 0;
    try (KafkaConsumer<String, String> cons = new KafkaConsumer<>(c)) {
      TopicPartition tp = new TopicPartition(topic, 0);
      cons.assign(List.of(tp));
      cons.seekToBeginning(List.of(tp));
      long deadline = System.currentTimeMillis() + 30000;
      while (got < n && System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<String, String> r : cons.poll(Duration.ofMillis(500))) {
          if (!r.value().equals("v" + r.offset())) throw new RuntimeException("bad record at " + r.offset());
          got++;
        }
      }
    }
    return "consumed " + got;
  }

  static String describeScram(String propsFile) throws Exception {
    try (Admin admin = Admin.create(load(propsFile))) {
      Map<String, UserScramCredentialsDescription> all = admin.describeUserScramCredentials().all().get();
      StringBuilder sb = new StringBuilder();
      for (String user : new TreeSet<>(all.keySet())) {
        for (ScramCredentialInfo info : all.get(user).credentialInfos())
          sb.append(user).append('=').append(info.mechanism()).append('/').append(info.iterations()).append(' ');
      }
      return sb.toString().trim();
    }
  }

  static String describe(Throwable t) {
    StringBuilder classes = new StringBuilder();
    String message = "";
    for (Throwable e = t; e != null; e = e.getCause()) {
      classes.append(e.getClass().getName()).append(' ');
      if (e.getMessage() != null) message = e.getMessage();
    }
    return classes.toString().trim() + ": " + message.replace('\n', ' ');
  }

  public static void main(String[] args) {
    for (int i = 0; i < args.length; i++) {
      String[] job = args[i].split(":", -1);
      String line;
      try {
        switch (job[0]) {
          case "roundtrip": line = roundtrip(job[1], job[2], Integer.parseInt(job[3])); break;
          case "describe-scram": line = describeScram(job[1]); break;
          default: throw new IllegalArgumentException("unknown job " + job[0]);
        }
        System.out.println("JOB " + i + " OK " + line);
      } catch (Throwable t) {
        System.out.println("JOB " + i + " ERROR " + describe(t));
      }
      System.out.flush();
    }
  }
}
